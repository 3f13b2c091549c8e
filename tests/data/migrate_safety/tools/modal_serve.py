"""Serve on Modal.

Example: pass an image such as 'vllm/vllm-openai:v0.22.0' to `serve_image`.
"""
import subprocess

import modal

# image: 'vllm/vllm-openai:v0.21.0' -> 'vllm/vllm-openai:v0.22.0' (see CHANGELOG.yaml)
image = modal.Image.from_registry("vllm/vllm-openai:v0.22.0")
app = modal.App("llm")


@app.function(image=image)
def serve():
    """Starts vLLM in vllm/vllm-openai:v0.22.0."""
    subprocess.Popen(["vllm", "serve", "Qwen/Qwen2.5-0.5B-Instruct"])

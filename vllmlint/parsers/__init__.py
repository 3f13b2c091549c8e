"""Front ends: each turns one file kind into the shared launch model (vllmlint.model)."""

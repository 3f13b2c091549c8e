from vllmlint.model.launch import Edit, Fix
from vllmlint.lint.registry import Rule


class UnusedSuppression(Rule):
    """A `# vllmlint: disable=...` comment that suppresses nothing.

    ## What it does
    Reports suppression comments (`# vllmlint: disable=CODE -- reason`,
    `# vllmlint: disable-file=CODE`) whose codes matched no finding in this run. Only codes of
    rules that ran are judged, so `--select` does not make other suppressions look unused.

    ## Why
    A suppression outlives the problem it hid: the config was fixed, the rule changed, the line
    moved. Left behind, it will silently hide the next real finding on that line. ruff's RUF100
    does the same for `# noqa`.

    ## Example
    ```yaml
    args: ["--model", "m", "--enable-scale-out"]  # vllmlint: disable=VL002 -- router migrates later
    ```
    The flag is there, VL002 no longer fires, and the comment is unused.

    ## Fix safety
    Safe when every code of the comment is unused: the comment is removed (its whole line when it
    stands alone). A comment with some used codes is reported, not edited.
    """

    code = "VL900"
    name = "unused-suppression"
    severity = "warning"
    fix = "sometimes"
    post = True          # runs after the other rules, on their suppressions

    def check(self, project):
        return []

    def check_directives(self, directives, ran_codes):
        for d in directives:
            judged = [c for c in d.codes if any(r.startswith(c) or c == "ALL" for r in ran_codes)]
            unused = [c for c in judged if not any(u.startswith(c) or c == "ALL" for u in d.used)]
            if not unused or "VL900" in d.codes:
                continue
            fix = None
            if len(unused) == len(d.codes):
                fix = Fix([self._removal(d)], "remove the unused suppression")
            yield self.finding(d.file, d.span, f"unused suppression of {', '.join(unused)}"
                               + (f" ({d.reason})" if d.reason else ""), fix)

    @staticmethod
    def _removal(d) -> Edit:
        text = d.file.text
        start, end = d.span
        line_start = text.rfind("\n", 0, start) + 1
        if not text[line_start:start].strip():
            nl = text.find("\n", end)
            return Edit(d.file, line_start, len(text) if nl < 0 else nl + 1, "")
        while start > line_start and text[start - 1] in " \t":
            start -= 1
        return Edit(d.file, start, end, "")

"""Tests for vllmlint.parsers.shell_lex (lexer with exact source offsets)."""
from __future__ import annotations

import random

import pytest

from vllmlint.parsers.shell_lex import (
    ArrayAssign,
    Operator,
    SimpleCommand,
    Word,
    commands,
    lex,
)


# -- helpers ------------------------------------------------------------------------------


def words(src: str) -> list[str]:
    return [t.value for t in lex(src) if isinstance(t, Word)]


def word_tokens(src: str) -> list[Word]:
    return [t for t in lex(src) if isinstance(t, Word)]


def ops(src: str) -> list[str]:
    return [t.text for t in lex(src) if isinstance(t, Operator)]


def cmd_words(src: str) -> list[list[str]]:
    return [[w.value for w in c.words] for c in commands(src)]


def check_offsets(src: str, w: Word, exact: bool = True) -> None:
    """Structural invariants; with `exact`, every value char is the source char it maps to."""
    assert len(w.offsets) == len(w.value)
    assert 0 <= w.start <= w.end <= len(src)
    assert all(w.start <= o < w.end for o in w.offsets), (w, w.offsets)
    assert all(a < b for a, b in zip(w.offsets, w.offsets[1:])), w.offsets
    if exact:
        assert [src[o] for o in w.offsets] == list(w.value), (w.value, w.offsets)


def all_words(tokens) -> list[Word]:
    out: list[Word] = []
    for t in tokens:
        if isinstance(t, Word):
            out.append(t)
        elif isinstance(t, ArrayAssign):
            out.extend(t.elements)
    return out


def check_tokens(src: str, tokens, exact: bool = False) -> None:
    prev_end = 0
    for t in tokens:
        assert isinstance(t, (Word, Operator, ArrayAssign))
        assert 0 <= t.start <= t.end <= len(src)
        assert t.start >= prev_end, "tokens must be in source order and not overlap"
        prev_end = t.end
        if isinstance(t, Operator):
            assert t.text in {";", "&", "&&", "||", "|", "|&", ";;", "(", ")", "{", "}", "\n"}
            assert src[t.start : t.end] in (t.text, ";&", ";;&")
    for w in all_words(tokens):
        check_offsets(src, w, exact=exact)


# -- words, values, offsets ---------------------------------------------------------------


def test_simple_words_and_offsets():
    src = "vllm serve  meta-llama/Llama-3 --port 8000"
    toks = lex(src)
    assert [t.value for t in toks] == ["vllm", "serve", "meta-llama/Llama-3", "--port", "8000"]
    for w in toks:
        assert src[w.start : w.end] == w.value
        assert w.offsets == tuple(range(w.start, w.end))
        assert not w.dynamic and not w.splits
        check_offsets(src, w)


def test_empty_and_blank_input():
    assert lex("") == []
    assert lex("   \t\r  ") == []
    assert commands("") == []
    assert ops("\n\n") == ["\n", "\n"]


def test_single_quotes():
    src = "echo 'a b \"$X\" \\n' x"
    w = word_tokens(src)[1]
    assert w.value == 'a b "$X" \\n'
    assert src[w.start : w.end] == "'a b \"$X\" \\n'"
    assert not w.dynamic and not w.splits
    check_offsets(src, w)


def test_double_quotes_escapes():
    src = r'echo "a\"b\\c\$d\`e\x\n"'
    w = word_tokens(src)[1]
    assert w.value == 'a"b\\c$d`e\\x\\n'
    assert src[w.start : w.end] == src[5:]
    check_offsets(src, w)
    # the escaped quote maps to the `"`, not to the backslash
    i = w.value.index('"')
    assert src[w.offsets[i]] == '"' and src[w.offsets[i] - 1] == "\\"
    assert not w.dynamic  # \$d is not an expansion


def test_backslash_outside_quotes():
    src = r"a\ b c\'d \$X"
    toks = word_tokens(src)
    assert [w.value for w in toks] == ["a b", "c'd", "$X"]
    assert toks[0].offsets == (0, 2, 3)
    assert not toks[2].dynamic
    for w in toks:
        check_offsets(src, w)


def test_trailing_backslash_is_literal():
    src = "echo a\\"
    w = word_tokens(src)[1]
    assert w.value == "a\\"
    check_offsets(src, w)


def test_mixed_quoting_in_one_word():
    src = """--x='a b'"c d"e\\ f$'\\t'"""
    (w,) = word_tokens(src)
    assert w.value == "--x=a bc de f\t"
    assert src[w.start : w.end] == src
    check_offsets(src, w, exact=False)
    assert [src[o] for o in w.offsets[:-1]] == list(w.value[:-1])
    assert src[w.offsets[-1]] == "\\"


def test_ansi_c_quoting():
    src = r"echo $'a\nb\x41\101\u00e9\U0001F600\cA\e\'q\z'"
    w = word_tokens(src)[1]
    assert w.value == "a\nbAA\u00e9\U0001F600\x01\x1b'q\\z"
    check_offsets(src, w, exact=False)
    # decoded escapes map to their backslash
    assert src[w.offsets[1]] == "\\" and src[w.offsets[1] + 1] == "n"
    assert src[w.offsets[0]] == "a"
    # unknown escape keeps the backslash and the char, each mapping to itself
    assert src[w.offsets[-2]] == "\\" and src[w.offsets[-1]] == "z"
    assert not w.dynamic


def test_ansi_c_bad_escapes_do_not_crash():
    for src in [r"$'\x'", r"$'\u'", r"$'\UFFFFFFFF'", r"$'\c'", "$'\\", "$'abc", r"$'\777'"]:
        toks = lex(src)
        check_tokens(src, toks)


def test_locale_string():
    src = 'echo $"hello $USER"'
    w = word_tokens(src)[1]
    assert w.value == "hello $USER"
    assert w.dynamic and not w.splits
    check_offsets(src, w)


# -- continuations and CRLF ----------------------------------------------------------------


def test_continuation_between_words():
    src = "vllm serve x \\\n  --port 1 \\\n\t--tp 2"
    toks = lex(src)
    assert all(isinstance(t, Word) for t in toks)
    assert [t.value for t in toks] == ["vllm", "serve", "x", "--port", "1", "--tp", "2"]
    for w in toks:
        assert src[w.start : w.end] == w.value


def test_continuation_glued_to_word():
    src = "vllm serve x\\\n  --port 1"
    assert words(src) == ["vllm", "serve", "x", "--port", "1"]
    x = word_tokens(src)[2]
    assert src[x.start : x.end] == "x"  # a trailing continuation belongs to the gap


def test_continuation_inside_word_is_removed():
    src = "--max-model\\\n-len=4096"
    (w,) = word_tokens(src)
    assert w.value == "--max-model-len=4096"
    assert src[w.start : w.end] == src
    check_offsets(src, w)
    assert w.offsets[11] == 13  # the '-' after the continuation


def test_continuation_inside_double_quotes():
    src = 'echo "a\\\nb"'
    w = word_tokens(src)[1]
    assert w.value == "ab"
    check_offsets(src, w)


def test_continuation_inside_single_quotes_is_literal():
    src = "echo 'a\\\nb'"
    assert word_tokens(src)[1].value == "a\\\nb"


def test_crlf():
    src = "vllm serve m \\\r\n  --port 1\r\necho hi\r\n"
    toks = lex(src)
    assert [t.value if isinstance(t, Word) else t.text for t in toks] == [
        "vllm", "serve", "m", "--port", "1", "\n", "echo", "hi", "\n",
    ]
    assert cmd_words(src) == [["vllm", "serve", "m", "--port", "1"], ["echo", "hi"]]
    for w in word_tokens(src):
        assert "\r" not in w.value
        check_offsets(src, w)


def test_crlf_inside_word_continuation():
    src = "--a\\\r\nb \"x\\\r\ny\""
    assert words(src) == ["--ab", "xy"]


# -- expansions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "src,value,dynamic,splits",
    [
        ("$X", "$X", True, True),
        ('"$X"', "$X", True, False),
        ("'$X'", "$X", False, False),
        ("--model=$M", "--model=$M", True, True),
        ('"--model=$M"', "--model=$M", True, False),
        ('"${X:-1}"', "${X:-1}", True, False),
        ("${X:-1}", "${X:-1}", True, True),
        ('"$@"', "$@", True, True),
        ('"${ARR[@]}"', "${ARR[@]}", True, True),
        ('"${!ARR[@]}"', "${!ARR[@]}", True, True),
        ('"${@:2}"', "${@:2}", True, True),
        ('"${#ARR[@]}"', "${#ARR[@]}", True, False),
        ('"${ARR[*]}"', "${ARR[*]}", True, False),
        ("$*", "$*", True, True),
        ('"$*"', "$*", True, False),
        ("$1", "$1", True, True),
        ('"$1"', "$1", True, False),
        ("$$", "$$", True, True),
        ("a$", "a$", False, False),
        ("$", "$", False, False),
        ('"a$"', "a$", False, False),
        ("$(date)", "$(date)", True, True),
        ('"$(date)"', "$(date)", True, False),
        ("$((1+2))", "$((1+2))", True, True),
        ("`date`", "`date`", True, True),
        ('"`date`"', "`date`", True, False),
        ("a${B}c", "a${B}c", True, True),
    ],
)
def test_expansion_flags(src, value, dynamic, splits):
    (w,) = word_tokens(src)
    assert (w.value, w.dynamic, w.splits) == (value, dynamic, splits)
    check_offsets(src, w)


def test_brace_expansion_with_nested_braces_and_quotes():
    src = 'echo "${X:-"a b}"}" ${Y:-{z\\}}} ${Z:-\'}\'} tail'
    toks = word_tokens(src)
    assert [w.value for w in toks] == ["echo", '${X:-"a b}"}', "${Y:-{z\\}}}", "${Z:-'}'}", "tail"]
    for w in toks:
        check_offsets(src, w)


def test_nested_command_substitution():
    src = 'x=$(echo "$(date +%s)" \')\' ")" $(( 1 + (2) ))) next'
    toks = word_tokens(src)
    assert len(toks) == 2
    assert toks[0].value == src[: src.index(" next")]
    assert toks[0].dynamic and toks[0].splits
    assert toks[1].value == "next"
    check_offsets(src, toks[0])


def test_command_substitution_with_case_patterns():
    src = "v=$(case $x in a|b) echo 1;; (c) echo 2;; esac) after"
    assert words(src) == ["v=$(case $x in a|b) echo 1;; (c) echo 2;; esac)", "after"]


def test_case_as_argument_inside_substitution_is_not_a_case():
    src = "v=$(echo case) after"
    assert words(src) == ["v=$(echo case)", "after"]


def test_command_substitution_with_comment_and_heredoc():
    src = "v=$(cat <<EOF\n) not the end\nEOF\n# comment )\necho hi\n) after"
    assert words(src) == [src[: src.index(" after")], "after"]


def test_arithmetic_shift_is_not_heredoc():
    src = "x=$((1<<2)) y"
    assert words(src) == ["x=$((1<<2))", "y"]


def test_backticks_with_escapes():
    src = "a=`echo \\`date\\``; b"
    assert words(src) == ["a=`echo \\`date\\``", "b"]
    assert ops(src) == [";"]


def test_process_substitution_is_a_word():
    src = "diff <(sort a) >(cat) x"
    assert words(src) == ["diff", "<(sort a)", ">(cat)", "x"]
    assert word_tokens(src)[1].dynamic


def test_extglob_word():
    assert words("ls @(a|b) !(x).py") == ["ls", "@(a|b)", "!(x).py"]


# -- comments -----------------------------------------------------------------------------


def test_comments():
    assert words("a b # c d") == ["a", "b"]
    assert words("a#b c") == ["a#b", "c"]
    assert words("# full line\nx") == ["x"]
    assert words("a;#x\nb") == ["a", "b"]
    assert words("echo '#not' \"#not\" \\#not") == ["echo", "#not", "#not", "#not"]
    assert ops("a # c ; d\nb") == ["\n"]


def test_comment_continuation_does_not_continue():
    assert cmd_words("# comment \\\nvllm serve m") == [["vllm", "serve", "m"]]


# -- operators ----------------------------------------------------------------------------


def test_operators():
    src = "a;b&c&&d||e|f|&g;;h(i)\nj"
    assert ops(src) == [";", "&", "&&", "||", "|", "|&", ";;", "(", ")", "\n"]
    assert words(src) == list("abcdefghij")
    check_tokens(src, lex(src), exact=True)


def test_case_fallthrough_operators_become_double_semicolon():
    assert ops("a;&b;;&c") == [";;", ";;"]


def test_braces_only_as_standalone_words():
    src = "{ a; b; } {x} {} a{ }b"
    toks = lex(src)
    assert [t.text if isinstance(t, Operator) else t.value for t in toks] == [
        "{", "a", ";", "b", ";", "}", "{x}", "{}", "a{", "}b",
    ]
    assert words("find . -exec rm {} \\;") == ["find", ".", "-exec", "rm", "{}", ";"]


def test_arithmetic_command_is_one_word():
    src = "(( i > 1 )) && vllm serve m"
    toks = lex(src)
    assert isinstance(toks[0], Word) and toks[0].value == "(( i > 1 ))"
    assert cmd_words(src) == [["(( i > 1 ))"], ["vllm", "serve", "m"]]


def test_nested_subshell_is_not_arithmetic():
    src = "((echo a); vllm serve m)"
    assert ops(src) == ["(", "(", ")", ";", ")"]
    assert cmd_words(src) == [["echo", "a"], ["vllm", "serve", "m"]]


# -- redirections -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "src",
    [
        "vllm serve m > out.log",
        "vllm serve m >out.log",
        "vllm serve m >> out.log",
        "vllm serve m 2>err",
        "vllm serve m 2> err 1>&2",
        "vllm serve m 2>&1",
        "vllm serve m &>all.log",
        "vllm serve m &>> all.log",
        "vllm serve m >&2",
        "vllm serve m < in.txt",
        "vllm serve m <<< 'here string'",
        "vllm serve m <<<$X",
        "vllm serve m 3<>rw",
        "vllm serve m >| clobber",
        "vllm serve m {fd}>file",
        "vllm serve m 10>\"/tmp/a b\"",
        "vllm serve m <&-",
        "vllm serve m < <(echo x)",
        "vllm serve m 2>(tee err)",
        "vllm serve m 2>",
    ],
)
def test_redirections_are_dropped(src):
    assert words(src) == ["vllm", "serve", "m"]
    assert ops(src) == []


def test_redirection_in_the_middle():
    assert words("2>/dev/null vllm >log serve 2>&1 m") == ["vllm", "serve", "m"]
    assert words("x>y z") == ["x", "z"]
    assert words("a 2>&1 | b") == ["a", "b"]
    assert ops("a 2>&1 | b") == ["|"]


# -- heredocs -----------------------------------------------------------------------------


def test_heredoc_body_skipped_and_next_command_seen():
    src = "cat <<EOF > f.txt\nvllm serve bogus\n  EOF not yet\nEOF\nvllm serve real --port 1\n"
    assert cmd_words(src) == [["cat"], ["vllm", "serve", "real", "--port", "1"]]
    assert "bogus" not in words(src)


def test_heredoc_quoted_delimiters():
    for delim, term in [("'EOF'", "EOF"), ('"EOF"', "EOF"), ("\\EOF", "EOF"), ("E'O'F", "EOF"),
                        ("'END SCRIPT'", "END SCRIPT")]:
        src = f"cat <<{delim}\n$(vllm serve bad)\n'unterminated\n{term}\necho ok"
        assert cmd_words(src) == [["cat"], ["echo", "ok"]], delim


def test_heredoc_dash_strips_tabs():
    src = "cat <<-EOF\n\tbody\n\tEOF\necho ok"
    assert cmd_words(src) == [["cat"], ["echo", "ok"]]
    # without `-`, an indented terminator does not end the body
    src2 = "cat <<EOF\n\tbody\n\tEOF\necho hidden\nEOF\necho ok"
    assert cmd_words(src2) == [["cat"], ["echo", "ok"]]


def test_two_heredocs_on_one_line():
    src = "cat <<A; cat <<-'B'\nbody a\nA\n\tbody b\n\tB\nvllm serve m"
    assert cmd_words(src) == [["cat"], ["cat"], ["vllm", "serve", "m"]]


def test_heredoc_with_pipeline_and_crlf():
    src = "python - <<'PY' | tee log\r\nprint('vllm serve x')\r\nPY\r\necho done\r\n"
    assert cmd_words(src) == [["python", "-"], ["tee", "log"], ["echo", "done"]]


def test_heredoc_unterminated_runs_to_end():
    src = "cat <<EOF\nline\nvllm serve m\n"
    assert cmd_words(src) == [["cat"]]


def test_heredoc_without_delimiter():
    assert words("cat <<") == ["cat"]
    assert words("cat << \nx") == ["cat", "x"]


def test_here_string_is_not_heredoc():
    src = "cat <<<EOF\nvllm serve m"
    assert cmd_words(src) == [["cat"], ["vllm", "serve", "m"]]


def test_heredoc_inside_array_newline():
    src = "cat <<E; A=(a\nbody\nE\nb)"
    arr = [t for t in lex(src) if isinstance(t, ArrayAssign)][0]
    assert [w.value for w in arr.elements] == ["a", "b"]


# -- arrays -------------------------------------------------------------------------------


def test_array_assignment_with_comments_and_newlines():
    src = 'ARGS=(\n  --model "$M"  # the model\n  --port 8000\n  \'--x y\' # ) not the end\n)\nvllm serve "${ARGS[@]}"'
    toks = lex(src)
    arr = toks[0]
    assert isinstance(arr, ArrayAssign)
    assert arr.name == "ARGS" and not arr.append
    assert [w.value for w in arr.elements] == ["--model", "$M", "--port", "8000", "--x y"]
    assert arr.start == 0 and src[arr.end - 1] == ")"
    for w in arr.elements:
        check_offsets(src, w)
    assert arr.elements[1].dynamic and not arr.elements[1].splits
    last = word_tokens(src)[-1]
    assert last.value == "${ARGS[@]}" and last.splits
    cmds = commands(src)
    assert cmds[0].arrays == [arr] and cmds[0].words == []
    assert [w.value for w in cmds[1].words] == ["vllm", "serve", "${ARGS[@]}"]


def test_array_append_and_same_line_command():
    src = "A+=(x y) vllm serve m; B=()"
    toks = lex(src)
    assert isinstance(toks[0], ArrayAssign) and toks[0].append and toks[0].name == "A"
    assert isinstance(toks[-1], ArrayAssign) and toks[-1].elements == ()
    cmds = commands(src)
    assert len(cmds[0].arrays) == 1
    assert [w.value for w in cmds[0].words] == ["vllm", "serve", "m"]
    assert len(cmds[1].arrays) == 1 and cmds[1].words == []


def test_array_with_continuations_and_crlf():
    src = "A=(a \\\r\n b\r\n c)"
    arr = lex(src)[0]
    assert [w.value for w in arr.elements] == ["a", "b", "c"]


def test_array_unterminated_and_stray_chars():
    src = "A=(a ; b | c"
    arr = lex(src)[0]
    assert isinstance(arr, ArrayAssign)
    assert [w.value for w in arr.elements] == ["a", "b", "c"]
    assert arr.end == len(src)


def test_declare_array():
    toks = lex("declare -A M=([k]=v [x]='y z')")
    assert [t.value for t in toks[:2]] == ["declare", "-A"]
    assert [w.value for w in toks[2].elements] == ["[k]=v", "[x]=y z"]


def test_not_an_array():
    assert words('A="(x)" B=\\(y') == ["A=(x)", "B=(y"]


# -- commands() ---------------------------------------------------------------------------


def test_assignment_prefix():
    (c,) = commands("VAR=1 B+=2 vllm serve x C=3")
    assert isinstance(c, SimpleCommand)
    assert [w.value for w in c.assignments] == ["VAR=1", "B+=2"]
    assert [w.value for w in c.words] == ["vllm", "serve", "x", "C=3"]
    assert (c.start, c.end) == (0, len("VAR=1 B+=2 vllm serve x C=3"))


def test_env_prefix_words():
    (c,) = commands("env A=1 CUDA_VISIBLE_DEVICES=0,1 vllm serve m")
    assert c.assignments == []
    assert [w.value for w in c.words] == ["env", "A=1", "CUDA_VISIBLE_DEVICES=0,1", "vllm", "serve", "m"]


def test_quoted_name_is_not_assignment():
    (c,) = commands('"A"=1 x')
    assert c.assignments == [] and [w.value for w in c.words] == ["A=1", "x"]
    (c,) = commands("1A=1 x")
    assert c.assignments == []


def test_assignment_only_commands_are_kept():
    cmds = commands("X=1\nexport Y=2\nZ=$(date) W='a b'")
    assert [w.value for w in cmds[0].assignments] == ["X=1"] and cmds[0].words == []
    assert [w.value for w in cmds[1].words] == ["export", "Y=2"]
    assert [w.value for w in cmds[2].assignments] == ["Z=$(date)", "W=a b"]


def test_exec_under_if():
    src = 'if [ -n "$X" ]; then\n  exec vllm serve m --port 1\nelif true; then x; else y; fi'
    assert cmd_words(src) == [
        ["[", "-n", "$X", "]"],
        ["exec", "vllm", "serve", "m", "--port", "1"],
        ["true"],
        ["x"],
        ["y"],
    ]


def test_if_one_liner():
    assert cmd_words("if true; then vllm serve m; fi") == [["true"], ["vllm", "serve", "m"]]


def test_negation_and_while():
    src = "while ! curl -s localhost; do sleep 1; done; until false; do :; done"
    assert cmd_words(src) == [["curl", "-s", "localhost"], ["sleep", "1"], ["false"], [":"]]


def test_for_loop_header_is_skipped():
    src = "for m in a b c; do vllm serve $m; done\nfor ((i=0;i<3;i++)); do echo $i; done"
    assert cmd_words(src) == [["vllm", "serve", "$m"], ["echo", "$i"]]
    assert cmd_words("for x\ndo echo $x\ndone") == [["echo", "$x"]]
    assert cmd_words("select x in a b; do echo; done") == [["echo"]]


def test_case_statement():
    src = (
        'case "$1" in\n'
        "  serve|run) vllm serve m ;;\n"
        "  (bench) python bench.py;;\n"
        "  *)\n    echo usage\n    exit 1\n    ;;\n"
        "esac\n"
        "echo after"
    )
    assert cmd_words(src) == [
        ["vllm", "serve", "m"],
        ["python", "bench.py"],
        ["echo", "usage"],
        ["exit", "1"],
        ["echo", "after"],
    ]


def test_nested_case_and_esac_without_final_dsemi():
    src = "case a in x) case b in y) echo in;; esac;; z) echo z\nesac; echo out"
    assert cmd_words(src) == [["echo", "in"], ["echo", "z"], ["echo", "out"]]


def test_function_headers():
    src = "main() {\n  vllm serve m\n}\nfunction other {\n  echo hi\n}\nfunction third() { x; }\nmain \"$@\""
    assert cmd_words(src) == [["vllm", "serve", "m"], ["echo", "hi"], ["x"], ["main", "$@"]]


def test_brace_group_and_subshell():
    src = "{ vllm serve m; } > log 2>&1 & (cd /x && python -m vllm.entrypoints.openai.api_server)"
    assert cmd_words(src) == [
        ["vllm", "serve", "m"],
        ["cd", "/x"],
        ["python", "-m", "vllm.entrypoints.openai.api_server"],
    ]


def test_double_bracket_stays_words():
    src = '[[ -f "$X" && $a < $b || ( x ) ]] && vllm serve m'
    cmds = commands(src)
    assert [w.value for w in cmds[0].words] == [
        "[[", "-f", "$X", "&&", "$a", "<", "$b", "||", "(", "x", ")", "]]",
    ]
    assert [w.value for w in cmds[1].words] == ["vllm", "serve", "m"]


def test_double_bracket_as_argument_is_not_special():
    assert cmd_words("echo [[ && vllm serve m") == [["echo", "[["], ["vllm", "serve", "m"]]


def test_quoted_reserved_word_is_a_command_word():
    assert cmd_words("'if' x; \"done\"") == [["if", "x"], ["done"]]


def test_time_is_a_normal_word():
    assert cmd_words("time vllm serve m") == [["time", "vllm", "serve", "m"]]


def test_pipeline_and_lists():
    src = "A=1 vllm serve m | tee log && echo ok || echo fail & wait"
    cmds = commands(src)
    assert [[w.value for w in c.words] for c in cmds] == [
        ["vllm", "serve", "m"], ["tee", "log"], ["echo", "ok"], ["echo", "fail"], ["wait"],
    ]
    assert [w.value for w in cmds[0].assignments] == ["A=1"]
    for c in cmds:
        assert 0 <= c.start < c.end <= len(src)


def test_command_spans_continuations():
    src = "vllm serve m \\\n  --port 1\n"
    (c,) = commands(src)
    assert src[c.start : c.end] == "vllm serve m \\\n  --port 1"


# -- sh -c script words -------------------------------------------------------------------


def test_sh_c_word_value_is_the_script_and_maps_back():
    src = "command: sh -c 'vllm serve m --port \"$PORT\" && echo up'"
    toks = word_tokens(src)
    script_word = toks[-1]
    script = script_word.value
    assert script == 'vllm serve m --port "$PORT" && echo up'
    inner = commands(script)
    assert [[w.value for w in c.words] for c in inner] == [
        ["vllm", "serve", "m", "--port", "$PORT"], ["echo", "up"],
    ]
    # map an inner word back to the outer file through the outer word's offsets
    port = inner[0].words[-1]
    outer = [script_word.offsets[o] for o in port.offsets]
    assert "".join(src[o] for o in outer) == "$PORT"


def test_bash_c_double_quoted_script_maps_back():
    src = 'bash -c "exec vllm serve \\"$MODEL\\" --tp 2"'
    script_word = word_tokens(src)[-1]
    assert script_word.value == 'exec vllm serve "$MODEL" --tp 2'
    inner = word_tokens(script_word.value)
    assert [w.value for w in inner] == ["exec", "vllm", "serve", "$MODEL", "--tp", "2"]
    model = inner[3]
    assert "".join(src[script_word.offsets[o]] for o in model.offsets) == "$MODEL"


# -- robustness ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "src",
    [
        'echo "abc', "echo 'abc", "echo $'abc", "echo `abc", "echo $(abc", "echo ${abc",
        "echo $((1+", 'echo "$(echo \'x', "A=(a b", "((", "))", ")(", "(((((", "<<", "<<-",
        ">", "2>&", "&>", "\\", "$", "'", '"', "`", "[[", "]] ]]", "{", "}", "case", "case x in",
        "for", "function", "f(", "esac", ";;", "\x00\xff\ufffe", "a=(\n#", "$'\\", "${#}",
        "cat <<'EOF", 'cat <<"', "echo ${x:-$(", "<(", "@(", "$[1+2]", "\\\r", "\r\r\n",
    ],
)
def test_malformed_input_never_raises(src):
    toks = lex(src)
    check_tokens(src, toks)
    for c in commands(src):
        assert 0 <= c.start <= c.end <= len(src)


def test_unterminated_quote_runs_to_end():
    src = 'vllm serve "m --port 1\nnext line'
    toks = word_tokens(src)
    assert [w.value for w in toks] == ["vllm", "serve", "m --port 1\nnext line"]
    assert toks[-1].end == len(src)
    check_offsets(src, toks[-1])


def test_bytes_input_is_accepted():
    toks = lex(b"vllm serve \xff")  # type: ignore[arg-type]
    assert [t.value for t in toks] == ["vllm", "serve", "\xff"]


def test_deep_nesting_does_not_recurse_forever():
    for src in [
        "$(" * 5000,
        "echo " + "$(" * 3000 + ")" * 3000 + " x",
        '"$(' * 3000,
        "${" * 5000,
        "`$(\"" * 2000,
        "(" * 5000 + ")" * 5000,
        "$((" * 3000,
    ]:
        toks = lex(src)
        check_tokens(src, toks)
        commands(src)
    src = "echo " + "$(" * 3000 + ")" * 3000 + " x"
    assert words(src)[-1] == "x"


FUZZ_ALPHABET = list("ab =$(){}[]'\"\\`#;&|<>\n\r\t-!@*0123456789") + [
    "<<", "EOF", "\nEOF\n", "$(", "${", "$'", "((", "))", "case ", " in ", "esac", ";;",
    "A=(", "if ", "then ", "fi", "\\\n", "\\\r\n", "2>&1", "<<-", "\t", "\x00", "é",
]


def test_fuzz_random_shell_like_strings():
    rng = random.Random(1234)
    for _ in range(2000):
        src = "".join(rng.choice(FUZZ_ALPHABET) for _ in range(rng.randint(0, 60)))
        toks = lex(src)
        check_tokens(src, toks)
        for c in commands(src):
            assert 0 <= c.start <= c.end <= len(src)
            for w in c.assignments + c.words:
                check_offsets(src, w, exact=False)


def test_fuzz_random_bytes():
    rng = random.Random(99)
    for _ in range(300):
        src = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))).decode("latin-1")
        check_tokens(src, lex(src))
        commands(src)


def test_plain_words_offsets_are_exact_in_fuzz():
    """Without $'..' decoding, every value char is exactly the source char it maps to."""
    rng = random.Random(7)
    alphabet = [c for c in FUZZ_ALPHABET if "$'" not in c]
    for _ in range(1000):
        src = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 50)))
        if "$'" in src:
            continue
        check_tokens(src, lex(src), exact=True)


# -- performance (linear-ish) -------------------------------------------------------------


@pytest.mark.parametrize(
    "unit",
    [
        "vllm serve m --port 8000 \\\n",
        "a" * 50 + " ",
        "(" ,
        "((",
        "$(",
        "'",
        '"',
        "# c\n",
        "cat <<E\n",
        "x\n",
        "case ",
        " \t",
        "\\\n",
        "A=(",
        "[[ ",
        "<<",
        "2>",
        "${",
        "`",
        "$'\\x41",
    ],
)
def test_large_inputs_are_fast(unit):
    # 200k chars of one pathological unit: must finish (a quadratic lexer would take minutes).
    # Speed itself is measured in bench/, never asserted here.
    size = 200_000
    src = unit * (size // len(unit))
    toks = lex(src)
    commands(src)
    assert isinstance(toks, list)


def _shell_texts():
    from pathlib import Path
    repo = Path(__file__).resolve().parent.parent
    roots = [repo / "fixtures", Path("/work/shared/corpus/files"), repo.parent / "shared" / "corpus" / "files"]
    seen = set()
    for root in roots:
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            if p.is_file() and (p.suffix in (".sh", ".bash", ".sbatch", ".slurm") or p.read_bytes()[:2] == b"#!"):
                text = p.read_text("utf-8", "replace")
                if text not in seen:
                    seen.add(text)
                    yield text


EDGE_SCRIPTS = [
    "vllm serve m \\\n  --port 1\n", "cat <<EOF\nbody\nEOF\nvllm serve m\n", "cat <<EOF\nbody never closed\n",
    "echo 'open\n", "echo $(date\n", "x=${a\n", "echo `date\n", "f() { vllm serve m; }\n", "echo ok \\\n",
    "arr=(vllm serve m)\n\"${arr[@]}\"\n", "case $x in a) vllm serve m;; esac\n", "echo $((1 + 2))\n", "no newline",
]


@pytest.mark.parametrize("text", EDGE_SCRIPTS)
def test_lex_checked_matches_two_passes_on_edges(text):
    from vllmlint.parsers.shell_lex import lex_checked
    bad, tokens = lex_checked(text)
    if tokens is not None:
        assert bad is None and tokens == lex(text, redirects=True)


def test_lex_checked_matches_two_passes_on_every_script():
    """The one-pass tokens (parse_shell's) are exactly what a second lex of the text gives, on
    every shell fixture and corpus script; most scripts take the one-pass road."""
    from vllmlint.parsers.shell_lex import lex_checked
    reused = total = 0
    for text in _shell_texts():
        bad, tokens = lex_checked(text)
        total += 1
        if tokens is not None:
            reused += 1
            assert tokens == lex(text, redirects=True)
    assert total > 50 and reused > total * 0.8

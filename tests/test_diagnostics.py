"""Every program in tests/p4/bad is rejected with the diagnostic its first line names.

The whole compiler runs (front end and BMv2 back end), so a construct only the back
end cannot lower is in the corpus too, with its position.

The first line of each program is ``// expect: LINE:COL: KIND: TEXT``: the error must
be reported in that file at that line and column, with that kind ("error" or
"unsupported") and a message containing TEXT; the rendered diagnostic must show the
offending source line and a caret under the column, as p4c does.
"""

from __future__ import annotations

import glob
import os
import re
import pytest

from p4sim.compiler import compile_file
from p4sim.compiler.diagnostics import CompileError
from p4sim.compiler.frontend import load_program

BAD_DIR = os.path.join(os.path.dirname(__file__), "p4", "bad")
_EXPECT = re.compile(r"^//\s*expect:\s*(\d+):(\d+):\s*(error|unsupported):\s*(.+?)\s*$")

BAD_PROGRAMS = sorted(glob.glob(os.path.join(BAD_DIR, "*.p4")))


def _expectation(path: str) -> tuple[int, int, str, str]:
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    m = _EXPECT.match(first)
    assert m, f"{path}: first line must be '// expect: LINE:COL: KIND: TEXT'"
    return int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)


def test_corpus_is_not_empty() -> None:
    assert len(BAD_PROGRAMS) >= 20


@pytest.mark.parametrize("path", BAD_PROGRAMS, ids=[os.path.basename(p)[:-3] for p in BAD_PROGRAMS])
def test_bad_program_diagnostic(path: str) -> None:
    line, col, kind, text = _expectation(path)
    with pytest.raises(CompileError) as info:
        compile_file(path)
    err = info.value
    assert text in err.message
    assert (os.path.abspath(err.pos.file), err.pos.line, err.pos.col) == (os.path.abspath(path), line, col)
    assert err.kind == kind
    with open(path, encoding="utf-8") as f:
        source_line = f.read().split("\n")[line - 1]
    rendered = err.render().split("\n")
    assert rendered[0] == f"{err.pos.file}:{line}:{col}: {kind}: {err.message}"
    assert rendered[1] == source_line.rstrip()
    assert rendered[2] == " " * (col - 1) + "^"


def test_error_in_included_file_points_into_that_file(tmp_path) -> None:
    (tmp_path / "defs.p4").write_text("header h_t {\n    bit<8> a;\n    bogus_t b;\n}\n")
    main = tmp_path / "main.p4"
    main.write_text('#include <core.p4>\n#include "defs.p4"\n')
    with pytest.raises(CompileError) as info:
        load_program(str(main))
    assert info.value.pos.file.endswith("defs.p4")
    assert (info.value.pos.line, info.value.pos.col) == (3, 5)
    assert "bogus_t" in info.value.message


def test_columns_survive_comments_and_macros(tmp_path) -> None:
    """cpp squeezes white space and removes comments; columns still match the source."""
    src = tmp_path / "cols.p4"
    line4 = "/* nothere */  const   bit<W>   X =   /* c */ 8 + nothere; // nothere"
    src.write_text("#include <core.p4>\n#define W 8\nheader h_t { bit<W> a; }\n" + line4 + "\n")
    with pytest.raises(CompileError) as info:
        load_program(str(src))
    assert (info.value.pos.line, info.value.pos.col) == (4, line4.index(" nothere;") + 2)
    assert info.value.message == "undefined name 'nothere'"


def test_truncated_programs_give_compile_errors_only(tmp_path) -> None:
    """Whatever is cut off, the front end answers with a CompileError (never another
    exception, which would reach the user as a traceback)."""
    good = os.path.join(BAD_DIR, "width_mismatch.p4")
    with open(good, encoding="utf-8") as f:
        text = f.read()
    path = tmp_path / "cut.p4"
    for cut in range(len(text) // 2, len(text), max(1, len(text) // 40)):
        path.write_text(text[:cut])
        with pytest.raises(CompileError) as info:
            load_program(str(path))
        assert info.value.pos.line >= 1


def test_missing_source_names_the_file_without_a_made_up_position(tmp_path) -> None:
    from p4sim.compiler import compile_file

    missing = str(tmp_path / "nope.p4")
    with pytest.raises(CompileError) as info:
        compile_file(missing)
    assert info.value.render() == f"{missing}: error: cannot open source file (no such file)"
    with pytest.raises(CompileError) as info:
        compile_file(str(tmp_path))
    assert info.value.render() == f"{tmp_path}: error: cannot open source file (is a directory)"


def test_error_without_any_position_renders_without_one() -> None:
    assert CompileError("cpp is missing").render() == "error: cpp is missing"
    # compile_file places such an error in the program's file (never at "0:0")
    assert CompileError("no main").in_file("p.p4").render() == "p.p4: error: no main"


@pytest.mark.parametrize("version, message", [
    ("-1", "the v1model version (V1MODEL_VERSION) must be a non-negative number"),
    ("20170101", "unknown v1model version (V1MODEL_VERSION) 20170101: the first supported is 20180101"),
    ("20990101", "unknown v1model version (V1MODEL_VERSION) 20990101"),
])
def test_unknown_v1model_version_is_refused_where_v1model_declares_it(version: str, message: str) -> None:
    """p4c checks ``__v1model_version`` (set by -DV1MODEL_VERSION) against the versions
    v1model.p4 knows; the error points at the constant in v1model.p4."""
    from p4sim.compiler import compile_file

    good = os.path.join(os.path.dirname(__file__), "p4", "good", "basic_ipv4.p4")
    with pytest.raises(CompileError) as info:
        compile_file(good, defines={"V1MODEL_VERSION": version})
    assert info.value.message.startswith(message)
    assert info.value.pos.file.endswith("v1model.p4") and info.value.pos.line > 0
    compile_file(good, defines={"V1MODEL_VERSION": "20200408"})  # the latest is fine

"""``p4sim compile``: p4c's command line, output files and error reporting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from google.protobuf import json_format, text_format

from p4sim.compiler.command import main
from p4sim.proto import p4i

GOOD = Path(__file__).parent / "p4" / "good" / "basic_ipv4.p4"

BAD = """#include <core.p4>
#include <v1model.p4>
struct metadata { }
struct headers { }
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t s) {
    state start { transition accept; }
}
control C(inout headers h, inout metadata m) { apply { } }
control I(inout headers h, inout metadata m, inout standard_metadata_t s) {
    table t { key = { s.ingress_port: exact; } actions = { NoAction; } }
    apply { t.apply(); t.apply(); }
}
control E(inout headers h, inout metadata m, inout standard_metadata_t s) { apply { } }
control D(packet_out p, in headers h) { apply { } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"""


def test_writes_json_and_p4info_in_every_format(tmp_path):
    out = tmp_path / "build"
    files = [out / "basic.p4info.txtpb", out / "basic.p4info.binpb", out / "basic.p4info.json"]
    rc = main(["--target", "bmv2", "--arch", "v1model", "--std", "p4-16",
               "--p4runtime-files", ",".join(map(str, files)), "-o", str(out), str(GOOD)])
    assert rc == 0
    bmv2 = json.loads((out / "basic_ipv4.json").read_text())
    assert bmv2["program"] == "basic_ipv4.p4"
    assert [t["name"] for t in bmv2["pipelines"][0]["tables"]] == ["MyIngress.ipv4_lpm"]
    text = text_format.Parse(files[0].read_text(), p4i.P4Info())
    binary = p4i.P4Info.FromString(files[1].read_bytes())
    from_json = json_format.Parse(files[2].read_text(), p4i.P4Info())
    assert text == binary == from_json
    assert text.tables[0].preamble.name == "MyIngress.ipv4_lpm"


def test_format_option_for_unknown_extensions(tmp_path):
    target = tmp_path / "p4info.out"
    rc = main(["--p4runtime-files", str(target), "--p4runtime-format", "text", "-o", str(tmp_path), str(GOOD)])
    assert rc == 0
    assert text_format.Parse(target.read_text(), p4i.P4Info()).pkg_info.arch == "v1model"


def test_defines_and_includes_reach_the_preprocessor(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "sizes.p4").write_text("#define TABLE_SIZE 77\n")
    src = GOOD.read_text().replace("size = 1024;", "size = TABLE_SIZE;")
    src = src.replace("#include <v1model.p4>", "#include <v1model.p4>\n#include \"sizes.p4\"\n#ifdef BIG\n#error big\n#endif")
    prog = tmp_path / "prog.p4"
    prog.write_text(src)
    assert main(["-I", str(inc), "-o", str(tmp_path), str(prog)]) == 0
    assert json.loads((tmp_path / "prog.json").read_text())["pipelines"][0]["tables"][0]["max_size"] == 77
    assert main(["-I", str(inc), "-D", "BIG", "-o", str(tmp_path), str(prog)]) == 1


def test_rejected_program_exits_1_with_a_p4c_style_message(tmp_path, capsys):
    prog = tmp_path / "bad.p4"
    prog.write_text(BAD)
    assert main(["-o", str(tmp_path), str(prog)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}:11:")  # the second apply
    assert "applied more than once" in err
    assert "Traceback" not in err
    assert not (tmp_path / "bad.json").exists()


def test_console_entry_point(tmp_path):
    rc = subprocess.run([sys.executable, "-m", "p4sim.cli", "compile", "-o", str(tmp_path), str(GOOD)],
                        capture_output=True, text=True, timeout=120)
    assert rc.returncode == 0, rc.stderr
    assert (tmp_path / "basic_ipv4.json").exists()


def test_p4c_bm2_ss_style_output_file(tmp_path):
    target = tmp_path / "out" / "basic.json"
    info = tmp_path / "basic.p4.p4info.txt"
    assert main(["--p4v", "16", "--p4runtime-files", str(info), "-o", str(target), str(GOOD)]) == 0
    assert json.loads(target.read_text())["__meta__"]["version"] == [2, 23]
    assert text_format.Parse(info.read_text(), p4i.P4Info()).tables


def test_missing_source_is_reported_without_a_fake_position(tmp_path, capsys):
    missing = tmp_path / "nope.p4"
    assert main(["-o", str(tmp_path), str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{missing}: error:") and "<builtin>" not in err

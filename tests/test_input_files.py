"""Inputs that become paths, and inputs a YAML loader takes but a testbed must not.

Names read from files (a topology's and an experiment's `name`, job names in `jobs:`, figure
and point names) become folders and files under results/: an experiment named
`../../../elsewhere/x` once wrote its results outside results/ (as root). Files that are not
UTF-8, and `.inf`/`.nan` numbers, printed a raw Python error or were taken as they were. Each
is now one line `FILE: FIELD: problem; fix`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from replays.figure import Figure, figure_names, load_figure
from topologies.schema import InputError, is_safe_name, load_spec
from workloads.experiment import load_experiment

REPO = Path(__file__).resolve().parents[1]
PSNET = {"kind": "psnet", "tors": 3, "ps": 2, "workers": [2, 2, 2], "worker_mbps": 1000, "scale": 10}
JOB = {"model": "tiny", "iterations": 2}
BAD_NAMES = ["../../../elsewhere/x", "..", ".hidden", "a/b", "a\\b", "a..b", "", "with space", "tab\t", "é"]
GOOD_NAMES = ["psnet-vgg16", "fig13", "a.b", "A_1", "x", "9-lives"]


def write(path: Path, data: dict | str | bytes) -> Path:
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def topology(tmp_path: Path, **fields: object) -> Path:
    return write(tmp_path / "topo.yaml", {**PSNET, **fields})


def experiment(tmp_path: Path, **fields: object) -> Path:
    topology(tmp_path)
    return write(tmp_path / "exp.yaml", {"topology": "topo.yaml", "job": JOB, **fields})


def one_line(call, *args) -> str:
    """The message of the input error (topology, experiment, figure) that call(*args) raises; one line."""
    with pytest.raises(InputError) as info:
        call(*args)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


# --- names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_plain_names_are_accepted_everywhere(tmp_path, name):
    assert is_safe_name(name)
    assert load_spec(topology(tmp_path, name=name)).name == name
    exp, _, _ = load_experiment(experiment(tmp_path, name=name))
    assert exp.name == name
    exp, _, _ = load_experiment(experiment(tmp_path, jobs=[{**JOB, "name": name}], job=None))
    assert exp.jobs[0].name == name


@pytest.mark.parametrize("name", BAD_NAMES)
def test_topology_name_that_is_not_one_path_component_is_refused(tmp_path, name):
    path = topology(tmp_path, name=name)
    msg = one_line(load_spec, path)
    assert msg.startswith(f"{path}: name: {name!r} cannot name a results folder; "), msg
    assert msg.endswith("e.g. psnet-vgg16")


@pytest.mark.parametrize("name", BAD_NAMES)
def test_experiment_name_that_is_not_one_path_component_is_refused(tmp_path, name):
    path = experiment(tmp_path, name=name)
    assert one_line(load_experiment, path).startswith(f"{path}: name: {name!r} cannot name a results folder"), name


def test_job_names_in_jobs_are_checked(tmp_path):
    jobs = [{**JOB, "name": "a"}, {**JOB, "name": "../b"}]
    path = experiment(tmp_path, jobs=jobs, job=None)
    assert one_line(load_experiment, path).startswith(f"{path}: jobs.1.name: '../b' cannot name a results folder")


def test_a_file_without_a_name_is_named_after_its_file_made_safe(tmp_path):
    """The default name is the file's stem with anything unsafe replaced; a name written in the
    file is checked, never rewritten."""
    topology(tmp_path)
    path = write(tmp_path / "my run..v2.yaml", {"topology": "topo.yaml", "job": JOB})
    assert load_experiment(path)[0].name == "my-run.v2"
    assert load_spec(write(tmp_path / ".hidden topo.yaml", PSNET)).name == "hidden-topo"
    named = write(tmp_path / "topo.yaml", {**PSNET, "name": "my run"})
    assert one_line(load_spec, named).startswith(f"{named}: name: 'my run' cannot name a results folder")


def test_figure_and_point_names_are_checked():
    shipped = load_figure("fig13")
    data = shipped.model_dump()
    with pytest.raises(ValueError, match=r"figure\n.*'\.\./x' cannot name a results folder"):
        Figure.model_validate({**data, "figure": "../x"})
    points = [{**data["points"][0], "id": "a/b"}]
    with pytest.raises(ValueError, match=r"points\.0\.id\n.*'a/b' cannot name a results folder"):
        Figure.model_validate({**data, "points": points})


@pytest.mark.parametrize("name", ["../../topologies/psnet-testbed", "/etc/passwd", "fig13/..", ".fig13"])
def test_a_figure_name_never_leaves_the_figures_folder(name):
    msg = one_line(load_figure, name)
    assert msg == f"{name}: no such figure; figures: {', '.join(figure_names('all'))}"


def test_every_shipped_name_is_valid():
    for path in sorted((REPO / "workloads" / "experiments").glob("*.yaml")):
        load_experiment(path)
    for name in figure_names():
        fig = load_figure(name)
        assert is_safe_name(fig.figure) and all(is_safe_name(p.id) for p in fig.points)
    for path in sorted((REPO / "topologies").glob("*.yaml")):
        assert is_safe_name(load_spec(path).name)


# --- encodings --------------------------------------------------------------------------------


def test_topology_file_not_utf8_names_the_field(tmp_path):
    path = write(tmp_path / "topo.yaml", b"kind: psnet\nname: caf\xe9\ntors: 3\n")
    assert one_line(load_spec, path) == f"{path}: name: not UTF-8 text; save the file as UTF-8"


def test_not_utf8_outside_any_value_names_the_line(tmp_path):
    path = write(tmp_path / "topo.yaml", b"kind: psnet\n# \xff\xfe comment\ntors: 3\n")
    assert one_line(load_spec, path) == f"{path}: line 2 (byte 0xff): not UTF-8 text; save the file as UTF-8"


def test_experiment_file_not_utf8_names_the_field(tmp_path):
    topology(tmp_path)
    path = write(tmp_path / "exp.yaml", b"topology: topo.yaml\njob: {model: tiny, name: j\xf6b}\n")
    assert one_line(load_experiment, path) == f"{path}: job.name: not UTF-8 text; save the file as UTF-8"


def test_utf16_file_is_refused_in_one_line(tmp_path):
    path = write(tmp_path / "topo.yaml", yaml.safe_dump(PSNET).encode("utf-16"))
    assert one_line(load_spec, path).endswith(": not UTF-8 text; save the file as UTF-8")


# --- numbers that are not finite --------------------------------------------------------------

NON_FINITE = [".inf", "-.inf", ".nan", ".NaN", "+.Inf"]


@pytest.mark.parametrize("value", NON_FINITE)
@pytest.mark.parametrize("field", ["scale", "worker_mbps", "K", "delay_ms"])
def test_topology_number_not_finite_is_refused(tmp_path, field, value):
    text = yaml.safe_dump({k: v for k, v in PSNET.items() if k != field}) + f"{field}: {value}\n"
    path = write(tmp_path / "topo.yaml", text)
    msg = one_line(load_spec, path)
    assert msg.startswith(f"{path}: {field}: ") and msg.endswith("is not a finite number; give a finite value"), msg


def test_infinity_as_a_string_is_refused_too(tmp_path):
    """pydantic reads the string "inf" as a float: caught after validation."""
    path = write(tmp_path / "topo.yaml", yaml.safe_dump({**PSNET, "scale": "inf"}))
    assert one_line(load_spec, path) == f"{path}: scale: inf is not a finite number; give a finite value"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("scale: .inf\n", "scale"),
        ("compress: .nan\n", "compress"),
        ("timeline:\n  - {at_s: .inf, action: link_down, link: [ps1_1, t1_1]}\n", "timeline.0.at_s"),
        ("random_failures: {k: 1, every_s: .inf, count: 2}\n", "random_failures.every_s"),
    ],
)
def test_experiment_number_not_finite_names_the_field(tmp_path, extra, field):
    topology(tmp_path)
    path = write(tmp_path / "exp.yaml", "topology: topo.yaml\njob: {model: tiny}\n" + extra)
    msg = one_line(load_experiment, path)
    assert msg.startswith(f"{path}: {field}: ") and msg.endswith("is not a finite number; give a finite value"), msg


def test_job_deadline_as_infinite_string_is_refused(tmp_path):
    topology(tmp_path)
    path = write(tmp_path / "exp.yaml", {"topology": "topo.yaml", "job": {**JOB, "deadline_s": "Infinity"}})
    assert one_line(load_experiment, path) == f"{path}: job.deadline_s: inf is not a finite number; give a finite value"


# --- timelines and scheme jobs --------------------------------------------------------------


def test_pause_senders_needs_a_scheme_job(tmp_path):
    path = experiment(tmp_path, timeline=[{"at_s": 1, "action": "pause_senders", "k": 1, "every_s": 1}])
    assert "pause_senders pauses hosts inside the scheme engine; it needs a scheme job" in one_line(
        load_experiment, path
    )


def test_a_scheme_job_refuses_fail_ps_but_takes_network_events(tmp_path):
    job = {**JOB, "scheme": "ring", "compute": "calibrated"}
    path = experiment(tmp_path, job=job, timeline=[{"at_s": 1, "action": "fail_ps", "node": "ps1_1"}])
    assert "a scheme job has no standby: fail the PS's cable (link_down) instead" in one_line(load_experiment, path)
    events = [
        {"at_step": 2, "action": "link_down", "link": ["ps1_1", "t1_1"]},
        {"at_s": 0, "action": "pause_senders", "k": 2, "every_s": 0.5},
    ]
    exp, _, _ = load_experiment(experiment(tmp_path, job=job, timeline=events))
    assert [e.action for e in exp.timeline] == ["link_down", "pause_senders"]


# --- YAML aliases -----------------------------------------------------------------------------
#: a file whose aliases nest: each level holds ten aliases of the level below (6 levels: 1.1
#: million values once expanded; every further level multiplies by ten)
def alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


LOOPS = {
    "list": "kind: psnet\ntors: &a [1, *a]\n",
    "mapping": "kind: psnet\nx: &m {y: [1, {z: *m}]}\n",
    "merge": "kind: psnet\nx: &m {<<: *m}\n",
}


@pytest.mark.parametrize("shape", sorted(LOOPS))
def test_an_alias_inside_its_own_anchor_is_one_line(tmp_path, shape):
    """It once ended in RecursionError (PyYAML builds a list that holds itself; the finite-number
    walk recursed into it forever)."""
    path = write(tmp_path / "topo.yaml", LOOPS[shape])
    msg = one_line(load_spec, path)
    assert msg.startswith(f"{path}: line 2: alias *") and "a loop); write the values out instead of the alias" in msg


def test_aliases_of_aliases_are_refused_before_anything_walks_them(tmp_path):
    """Six levels took 1.5 s to walk and each level more multiplies that by ten: the expansion is
    counted on the composed document (each node once) and refused past MAX_YAML_VALUES."""
    path = write(tmp_path / "topo.yaml", "kind: psnet\n" + alias_bomb(6))
    assert one_line(load_spec, path) == (
        f"{path}: line 7: aliases expand the file to 1,234,575 values (at most 100,000; *a4 here to 111,111: "
        "aliases of aliases multiply); write the values out or nest fewer aliases"
    )
    path = write(tmp_path / "topo.yaml", "kind: psnet\n" + alias_bomb(30))  # 10^31 values: still one line
    assert "aliases expand the file to " in one_line(load_spec, path)


def test_aliases_nested_too_deep_and_deep_files_are_one_line(tmp_path):
    chain = ["a0: &a0 [1]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 60)]
    path = write(tmp_path / "topo.yaml", "\n".join(chain) + "\n")
    assert one_line(load_spec, path) == (
        f"{path}: line 60: alias *a58 nests the file 62 levels deep (at most 50); write the values out or nest "
        "fewer aliases"
    )
    path = write(tmp_path / "topo.yaml", "kind: " + "[" * 600 + "]" * 600 + "\n")  # RecursionError in PyYAML before
    assert one_line(load_spec, path) == f"{path}: line 1: nested more than 50 levels deep; flatten the file"


def test_a_few_plain_aliases_still_load(tmp_path):
    text = yaml.safe_dump({k: v for k, v in PSNET.items() if k != "workers"}) + "workers: [&two 2, *two, *two]\n"
    assert load_spec(write(tmp_path / "topo.yaml", text)).workers == [2, 2, 2]
    exp = write(tmp_path / "exp.yaml", "topology: topo.yaml\njob: {<<: &base {model: tiny}, iterations: 3}\n")
    job = load_experiment(exp)[0].job
    assert job is not None and (job.model, job.iterations) == ("tiny", 3)


def test_every_kind_of_file_refuses_a_looping_alias(tmp_path, monkeypatch):
    """Topology, experiment, figure, matrix and inventory files are all read by read_yaml."""
    from replays import figure
    from replays.matrix import load_matrix
    from servers.inventory import load_inventory

    loop = "x: &a [*a]\n"
    topology(tmp_path)
    exp = write(tmp_path / "exp.yaml", "topology: topo.yaml\njob: {model: tiny}\n" + loop)
    matrix = write(tmp_path / "matrix.yaml", loop)
    inventory = write(tmp_path / "inventory.yaml", loop)
    (tmp_path / "figs").mkdir()
    fig = write(tmp_path / "figs" / "figx.yaml", loop)
    monkeypatch.setattr(figure, "FIGURES", tmp_path / "figs")
    for call, arg, path in [
        (load_experiment, exp, exp),
        (load_matrix, matrix, matrix),
        (load_inventory, inventory, inventory),
        (figure.load_figure, "figx", fig),
    ]:
        msg = one_line(call, arg)
        assert msg.startswith(f"{path}: line "), msg
        assert "alias *a points into the value that holds it" in msg, msg

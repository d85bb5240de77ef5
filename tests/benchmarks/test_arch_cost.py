"""`benchmarks/arch_cost.py`: the cases it lists, the ratios to dcgan and the table.

The measuring half builds TensorFlow training runs and is exercised by running the script; these
tests pin its pure parts: how --row is read, which cases a command measures in which order,
the rotation of the interleaved rounds, and the medians and ratios the table prints.
"""

import pytest

from benchmarks import arch_cost


def test_parse_row_reads_label_and_flags():
    case = arch_cost.parse_row("r3gan w16: --arch=r3gan --g_width=16 --d_width=16", 28)
    assert case == arch_cost.CostCase("r3gan w16", 28, ("--arch=r3gan", "--g_width=16",
                                                          "--d_width=16"))
    assert arch_cost.flag_values(case.flags) == {"arch": "r3gan", "g_width": 16, "d_width": 16}
    assert arch_cost.flag_values(("--d_spectral_norm=false",)) == {"d_spectral_norm": False}
    with pytest.raises(ValueError, match="--widths is not a run.py flag"):
        arch_cost.flag_values(("--widths=3",))


@pytest.mark.parametrize("text", ["no colon --arch=r3gan", ": --arch=r3gan", "label:",
                                  "label: --arch r3gan", "label: arch=r3gan"])
def test_parse_row_refuses_malformed_rows(text):
    with pytest.raises(ValueError, match="--row"):
        arch_cost.parse_row(text, 28)


def test_cases_list_archs_by_resolution_then_rows():
    listed = arch_cost.cases(["dcgan", "r3gan"], [28, 64], ["narrow: --arch=r3gan --g_width=16"],
                             [28])
    assert [(c.label, c.resolution, c.flags) for c in listed] == [
        ("dcgan", 28, ("--arch=dcgan",)), ("r3gan", 28, ("--arch=r3gan",)),
        ("dcgan", 64, ("--arch=dcgan",)), ("r3gan", 64, ("--arch=r3gan",)),
        ("narrow", 28, ("--arch=r3gan", "--g_width=16"))]
    split = arch_cost.cases([], [28], ["a: --arch=r3gan"], [28, 32], ("b: --arch=r3gan",))
    assert [(c.label, c.resolution, c.split) for c in split] == [
        ("a", 28, False), ("b", 28, True), ("a", 32, False), ("b", 32, True)]


def test_split_rows_trace_the_group_by_group_form_in_training():
    import tensorflow as tf

    from gan import r3gan
    layer = r3gan.GroupedConv2D(8, 4)
    inputs = tf.zeros((1, 5, 5, 8))

    def convolutions():
        graph = tf.function(lambda x: layer(x, training=True)).get_concrete_function(inputs).graph
        return sum(op.type == "Conv2D" for op in graph.get_operations())

    with arch_cost.split_grouped_convolutions(True):
        assert convolutions() == 4
    with arch_cost.split_grouped_convolutions(False):
        assert convolutions() == 1


def test_rotated_starts_each_round_one_case_later():
    assert [arch_cost.rotated([1, 2, 3], r) for r in range(4)] == [
        [1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3]]
    assert arch_cost.rotated([], 2) == []


def _record(label, resolution, rates, gflops):
    return {"label": label, "resolution": resolution, "images_per_second": rates,
            "gflops_per_image": gflops, "precision": "float32", "parameters": 2_500_000}


def test_cost_and_flop_ratios_are_against_dcgan_at_the_same_resolution():
    rows = arch_cost.with_flop_ratios(arch_cost.cost_rows([
        _record("dcgan", 28, [400.0, 100.0, 300.0], 0.2),
        _record("r3gan", 28, [30.0, 40.0, 10.0], 3.0),
        _record("r3gan", 64, [5.0], 10.0)]))
    assert [row["median_images_per_second"] for row in rows] == [300.0, 30.0, 5.0]
    assert rows[0]["cost_vs_reference"] == 1.0 and rows[1]["cost_vs_reference"] == 10.0
    assert rows[1]["flops_vs_reference"] == pytest.approx(15.0)
    assert rows[2]["cost_vs_reference"] is None and rows[2]["flops_vs_reference"] is None
    table = arch_cost.markdown_table(rows)
    assert table[3] == ("| r3gan | 28 | float32 | 2.50 M | 3.000 | 15.0x | 30 | 30, 40, 10 | "
                        "10.0x |")
    assert table[4].endswith("| - | 5 | 5 | - |")


def test_parse_args_refuses_unknown_archs_and_bad_rows():
    with pytest.raises(SystemExit):
        arch_cost.parse_args(["--archs", "dcgan,stylegan"])
    with pytest.raises(SystemExit):
        arch_cost.parse_args(["--row", "broken"])
    with pytest.raises(SystemExit):
        arch_cost.parse_args(["--row", "narrow: --arch=r3gan --r3gan_width=16"])
    args = arch_cost.parse_args(["--resolutions", "28,32", "--repeats", "2"])
    assert args.resolutions == [28, 32] and args.archs == list(arch_cost.ARCHS)

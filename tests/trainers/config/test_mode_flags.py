"""The flags of `--mode=sample`, `export` and `plot` (`config.validation`), refused when the
config is resolved, before any mode runs."""

import pytest

from trainers.config.flags import Config, ConfigError
from trainers.config.validation import parse_grid
from trainers.setups import registry


def _resolved(**fields):
    return registry.resolve(Config(**fields))


def test_grid_parsing_and_validation():
    assert parse_grid("") is None
    assert parse_grid("8x8") == (8, 8) and parse_grid("2x13") == (2, 13)
    for bad in ("8", "8x", "0x4", "3X4", "-1x2", "2x3x4", " 2x3"):
        with pytest.raises(ConfigError, match=f"--grid={bad!r}"):
            parse_grid(bad)
    assert _resolved(grid="2x3", num_samples=6).grid == "2x3"
    with pytest.raises(ConfigError, match="--num_samples=10 .*draws 6 samples"):
        _resolved(grid="2x3", num_samples=10)
    with pytest.raises(ConfigError, match="--grid='2x3' .*drop --grid"):
        _resolved(grid="2x3", interpolate=5)
    with pytest.raises(ConfigError, match="--interpolate=1"):
        _resolved(interpolate=1)
    with pytest.raises(ConfigError, match="--truncation=-0.5"):
        _resolved(truncation=-0.5)


@pytest.mark.parametrize("fields, flag", [
    ({"export_format": "onnx"}, "--export_format='onnx'"),
    ({"quantize": "int4", "export_format": "tflite"}, "--quantize='int4'"),
    ({"quantize": "float16"}, "--quantize='float16'"),
    ({"quantize": "dynamic_int8", "export_format": "tfjs"}, "--quantize='dynamic_int8'"),
    ({"quantize": "uint8", "export_format": "tflite"}, "--quantize='uint8'"),
    ({"export_name": "../up"}, "--export_name='../up'"),
    ({"export_name": ".hidden"}, "--export_name='.hidden'"),
    ({"export_version": -1}, "--export_version=-1"),
    ({"export_dir": ""}, "--export_dir=''"),
    ({"mode": "plot", "output": "curves.npy"}, "--output='curves.npy'"),
])
def test_export_and_plot_flags_are_validated(fields, flag):
    with pytest.raises(ConfigError, match=flag.replace(".", r"\.")):
        _resolved(**fields)

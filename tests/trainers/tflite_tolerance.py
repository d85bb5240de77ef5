"""How far a TFLite export may differ from its SavedModel, per `--quantize`."""

# Allowed |TFLite - SavedModel| difference in uint8 levels for the same noise, on images that
# span 0..255. float32 TFLite differs only where float reordering crosses a rounding boundary;
# float16 weights move a pixel by a level now and then; dynamic int8 is looser. Measured on
# this model: max 0 / 1 / 4, mean 0 / 0.02 / 0.28 (benchmarks/results/export.md has the table).
TFLITE_TOLERANCE = {"none": {"max": 1, "mean": 0.01},
                    "float16": {"max": 3, "mean": 0.1},
                    "dynamic_int8": {"max": 16, "mean": 1.5}}

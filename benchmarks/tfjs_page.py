"""Size and load time of the `--export_format=tfjs` page, per `--quantize`, in headless Chromium.

A default-size DCGAN (width 64, latent 100, 28 px; fresh weights, as sizes and timing do not
depend on training) is exported once per quantization; each page is opened from a 127.0.0.1
server and timed from navigation start until it has drawn its grid, strip and current image.
Also the largest pixel difference of the grid's first image against the SavedModel.

    .venv/bin/python benchmarks/tfjs_page.py [--runs=3]
"""

import argparse
import dataclasses
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tests.trainers.browser import Browser, serve  # noqa: E402
from tests.trainers.synthetic_run import write_run  # noqa: E402
from trainers.modes import export, tfjs  # noqa: E402

FIRST_IMAGE = """(() => { const c = document.querySelector("#grid canvas");
  return Array.from(c.getContext("2d").getImageData(0, 0, c.width, c.height).data
                    .filter((_, i) => i % 4 === 0)); })()"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = tempfile.mkdtemp()
    run = write_run(os.path.join(root, "run"), g_width=64, latent_dim=100)
    print("| quantize | model.json + weights | load to first picture (ms, median) | max diff | backend |")
    print("| --- | --- | --- | --- | --- |")
    for version, quantize in enumerate(("none", "float16", "uint8")):
        result = export.export(dataclasses.replace(run.config, export_format="tfjs",
                                                   quantize=quantize, export_version=version))
        directory = os.path.join(result.path, tfjs.SUBDIR)
        noise = np.fromfile(os.path.join(directory, "noise.bin"), "<f4").reshape(
            tfjs.SEEDS, tfjs.SAMPLES, -1)[0, :1]
        expected = tf.saved_model.load(result.path).signatures["serving_default"](
            noise=tf.constant(noise))["images"].numpy()[0, :, :, 0].astype(int)
        server = serve(directory)
        times, diff = [], 0
        for index in range(args.runs):
            browser = Browser(f"http://127.0.0.1:{server.server_port}/index.html",
                              os.path.join(root, f"profile{version}-{index}"))
            browser.wait_until_ready()
            times.append(browser.evaluate("performance.now()"))
            pixels = np.array(browser.evaluate(FIRST_IMAGE)).reshape(expected.shape)
            diff = max(diff, int(np.abs(pixels - expected).max()))
            backend = browser.evaluate("tf.getBackend()")
            browser.close()
        server.shutdown()
        print(f"| {quantize} | {result.sizes['tfjs model'] / 1e6:.2f} MB | "
              f"{np.median(times):.0f} | {diff} | {backend} |")


if __name__ == "__main__":
    main()

"""Running a trained model over a NumPy array, batch by batch: what a mode does with a restored
model's outputs (a CycleGAN's translations, a student's and a teacher's logits).

TensorFlow is imported inside the function (see `protocol`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import keras
    import numpy as np


def predict(model: keras.Model, inputs: np.ndarray, *, batch_size: int = 250) -> np.ndarray:
    """`model` applied to `inputs` in inference mode, batch by batch, as one array."""
    import numpy as np
    import tensorflow as tf
    compiled = tf.function(lambda x: model(x, training=False))
    return np.concatenate([compiled(tf.constant(inputs[start:start + batch_size])).numpy()
                           for start in range(0, len(inputs), batch_size)])

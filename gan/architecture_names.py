"""The names of the image network families (`--arch`), without their builders.

`gan.architectures` maps each name to its builders and imports Keras; `--arch`'s choices are
needed before TensorFlow is imported, so the names live here alone, and `architectures` refuses
to load when its table names other families.
"""

# The family whose block shape the config checks (`trainers.config.validation`).
R3GAN = "r3gan"
NAMES = ("dcgan", "resnet", R3GAN)

#!/bin/sh
# Makes sure the Fashion-MNIST IDX files are on this machine without any download from the
# dataset's own servers: Debian's package `dataset-fashion-mnist` ships them. Where they are
# missing and apt-get can be used (root), it installs the package; otherwise it prints the
# command to run. It never fails the build: with internet access, TFDS downloads the data itself.
DIR="${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
if [ -f "$DIR/train-images-idx3-ubyte.gz" ] && [ -f "$DIR/t10k-labels-idx1-ubyte.gz" ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Fashion-MNIST not found in $DIR: installing Debian package dataset-fashion-mnist"
  if apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 ||
     { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1; }; then
    exit 0
  fi
  echo "apt-get could not install dataset-fashion-mnist."
fi
cat <<MSG
Fashion-MNIST IDX files are not in $DIR. Get them one of these ways:
  1. sudo apt-get install dataset-fashion-mnist      (Debian/Ubuntu; files land in /usr/share/datasets/fashion-mnist)
  2. put train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz,
     t10k-labels-idx1-ubyte.gz in a folder and pass --fashion_mnist_dir=FOLDER
  3. with internet access, do nothing: TFDS downloads the dataset on first use.
MSG

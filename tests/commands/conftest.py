"""The fixtures of this folder's tests."""

from tests.model_files import model  # noqa: F401 - a tiny HF model folder, once per test module

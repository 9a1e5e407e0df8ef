"""Whole models built from :mod:`attnlab.nn`, each with a frozen config and save/load."""

from attnlab.models.base import ModelConfig, SavableModel, load_model

__all__ = ["ModelConfig", "SavableModel", "load_model"]

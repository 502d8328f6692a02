from grok_lightning.modules.grokking import GrokkingModule, parameter_groups

__all__ = ["GrokkingModule", "parameter_groups"]

from grok_lightning.data.modular import ModularArithmeticDataModule, modular_table

__all__ = ["ModularArithmeticDataModule", "modular_table"]

"""Stand-in for the language module's attention-backend check (same switches, same outcome)."""

import os

EXPECTED = {
    "flash": (1, 0, 0), "fused": (0, 1, 0), "unfused": (0, 0, 1), "local": (0, 0, 0), "auto": (1, 1, 1),
}


class LanguageModule:
    def _set_attention_backend(self):
        backend = self.config.attention_backend
        name = getattr(backend, "name", backend)
        switches = ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN")
        for variable, value in zip(switches, EXPECTED[name], strict=True):
            current = os.getenv(variable)
            assert current is None or current == str(value), (
                f"{variable} set to {current}, but expected {value} for attention backend type {name}")
            os.environ[variable] = str(value)

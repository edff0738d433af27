"""Stand-in for Primus's experiment loading: pre_trainer defaults + model defaults + the experiment's overrides."""

import os
from types import SimpleNamespace

import yaml
from megatron.training.arguments import DEFAULTS

PRE_TRAINER = {
    **DEFAULTS, "num_workers": 8, "dataloader_type": "cyclic", "save_interval": 1000, "masked_softmax_fusion": False,
    "attention_softmax_in_fp32": True, "seed": 1234, "split": "99,1,0", "disable_last_saving": False,
    "train_data_path": None, "valid_data_path": None, "test_data_path": None, "data_path": None, "mock_data": True,
    "lr_decay_iters": None, "stderr_sink_level": "INFO",
}


class _Config:
    def __init__(self, document, module):
        self.exp_meta_info = {key: document[key] for key in ("work_group", "user_name", "exp_name")}
        self.exp_root_path = os.path.join(document["workspace"], *self.exp_meta_info.values())
        self._module = module

    def get_module_config(self, name):
        assert name == "pre_trainer"
        return self._module


def load_primus_config(args, overrides):
    with open(args.config, encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    module = dict(PRE_TRAINER)
    module.update(document["modules"]["pre_trainer"].get("overrides") or {})
    return _Config(document, SimpleNamespace(**module)), {}

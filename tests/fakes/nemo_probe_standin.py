"""Stand-in for ``python -m train.nemo.probe`` in the NeMo Python (tests only).

Records its argv and request in ``$TPRIMAT_FAKE_RECORD`` and answers in the probe's format
with what a NeMo recipe would hold after tprimat's overrides: the overridden fields over the
defaults of NeMo's base GPT config (every fusion off, fp32 gradient reduction in the bf16
plugin), and the one connection rule the tests need to see caught: the precision plugin's
``grad_reduce_in_fp32`` overwrites the DDP config's. The scaled init std is the GPTConfig's
rule, init_method_std / sqrt(2 * num_layers) (``TPRIMAT_FAKE_INIT_MULTIPLIER`` changes the 2).
Nothing here is NeMo code; the real behaviour is judged by tests/conformance/.
"""

from __future__ import annotations

import json
import math
import os
import sys

BASE_MODEL = {
    "bias_activation_fusion": False, "bias_dropout_fusion": False, "masked_softmax_fusion": True,
    "persist_layer_norm": False, "apply_rope_fusion": False, "cross_entropy_loss_fusion": True,
    "gradient_accumulation_fusion": True, "attention_softmax_in_fp32": False, "fp32_residual_connection": False,
    "recompute_granularity": None, "tp_comm_overlap": False, "calculate_per_token_loss": False,
    "normalization": "RMSNorm", "hidden_dropout": 0.0, "attention_dropout": 0.0, "attention_backend": "auto",
    "fp8": None, "cross_entropy_fusion_impl": "native",
}


def plain(value):
    if isinstance(value, dict) and value.get("_call_") == "member":
        return value["name"]
    return value


def section(fields, prefix):
    return {key[len(prefix):]: plain(value) for key, value in fields.items() if key.startswith(prefix)}


def lr_by_step(lr, min_lr, warmup, steps):
    """NeMo's warm-up LR*k/(W+1) for step k, then cosine to MIN_LR (the last step as Megatron's)."""
    def after(done):
        if done < warmup:
            return lr * (done + 1) / (warmup + 1)
        ratio = min(1.0, (done - warmup) / max(steps - warmup, 1))
        return min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * ratio))
    last = min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * (steps - 1 - warmup) / max(steps - warmup, 1)))
    return {"lr_step_1": after(0), "lr_step_2": after(1), "lr_step_last": last}


def callbacks(fields):
    """The recipe's callbacks by class name (its TimingCallback unless the overrides replace the list)."""
    configured = fields.get("trainer.callbacks", [{"_target_": "nemo.utils.exp_manager.TimingCallback"}])
    gc = [c for c in configured if c["_target_"].endswith(".GarbageCollectionCallback")]
    return {"callbacks": [c["_target_"].rsplit(".", 1)[1] for c in configured],
            "gc_interval_train": gc[0]["gc_interval_train"] if gc else None}


def main() -> int:
    request = json.loads(sys.stdin.read())
    record = os.environ.get("TPRIMAT_FAKE_RECORD")
    if record:
        with open(record, "w", encoding="utf-8") as handle:
            json.dump({"argv": sys.argv, "request": request}, handle)
    with open(request["overrides"], encoding="utf-8") as handle:
        fields = json.load(handle)["fields"]
    plugin = fields.get("trainer.plugins", {})
    bf16 = "bf16" in plugin.get("_target_", "")
    model = {**BASE_MODEL, **section(fields, "model.config."), "bf16": bf16, "fp16": "fp16" in plugin["_target_"]}
    # GPTConfig.__post_init__ (a TransformerConfig): init_method_std / sqrt(2 * num_layers), unless the tests
    # change the multiplier
    multiplier = float(os.environ.get("TPRIMAT_FAKE_INIT_MULTIPLIER", "2"))
    model["output_layer_init_method_std"] = model["init_method_std"] / math.sqrt(multiplier * model["num_layers"])
    if "fp8" in plugin.get("_target_", ""):  # bf16_with_fp8_mixed's own values, then tprimat's
        model.update(fp8="hybrid", fp8_recipe="delayed", fp8_amax_history_len=1024, fp8_amax_compute_algo="max")
        model.update({key: value for key, value in section(fields, "trainer.plugins.").items() if "fp8" in key})
    ddp = {k: v for k, v in fields["trainer.strategy.ddp"].items() if not k.startswith("_")}
    ddp["grad_reduce_in_fp32"] = fields.get("trainer.plugins.grad_reduce_in_fp32", True)  # plugin wins at connect
    if model["fp8"]:
        ddp["fp8_param_gather"] = model.pop("fp8_param_gather", True)
    sched = {k: v for k, v in fields["optim.lr_scheduler"].items() if not k.startswith("_")}
    data = {k: v for k, v in fields["data"].items() if not k.startswith("_") and k != "tokenizer"}
    data.setdefault("num_workers", 8)
    data.setdefault("persistent_workers", False)
    data.setdefault("create_attention_mask", False)
    data["dataloader_type"] = "single"
    raw = {
        "model": model, "optimizer": section(fields, "optim.config."), "scheduler": sched,
        "scheduler_class": fields["optim.lr_scheduler"]["_target_"].rsplit(".", 1)[1], "ddp": ddp,
        "strategy": section(fields, "trainer.strategy."), "data": data,
        "trainer": {**section(fields, "trainer."), **callbacks(fields), "checkpoint_callbacks": []},
        "log": {"ckpt": None}, "resume": None, "world_size": int(request["world_size"]),
    }
    steps = fields["trainer.max_steps"]
    answer = {"ok": True, "raw": raw, "framework": {"nemo": "0.0.0+fake"}, "stand_ins": [],
              "have_transformer_engine": True,
              "lr_by_step": lr_by_step(model.get("lr", fields["optim.config.lr"]), sched["min_lr"],
                                       sched["warmup_steps"], steps)}
    print("TPRIMAT_PROBE " + json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())

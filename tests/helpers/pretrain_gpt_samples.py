"""Samples of the dataset Megatron-LM's ``pretrain_gpt.py`` builds from its arguments: run in a side environment.

``python -m tests.helpers.pretrain_gpt_samples REQUEST.json`` (from the repository root; a request, or a list of
them built one after the other, so torch, megatron-core and transformers are imported once) with megatron-core
and an image's transformers on ``PYTHONPATH`` (``tests/helpers/megatron_core.py: side_pythonpath``). It builds
the tokenizer and the training dataset as 847781764f's ``pretrain_gpt.py`` does
(``core_gpt_dataset_config_from_args``, lines 164-193: ``build_tokenizer(args)`` of
``megatron.core.tokenizers``, then ``GPTDatasetConfig`` from the arguments, then
``BlendedMegatronDatasetBuilder`` with the train, valid and test sizes) and writes the requested samples, each as
its ``SL + 1`` tokens (``tokens`` plus the last of ``labels``). Standard library, numpy and Megatron only, so
the code judged is the wheel's, under the transformers the image runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

import numpy as np


def build(request: dict) -> None:
    """Build one request's tokenizer and training dataset; write its samples to ``request["out"]``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import megatron.core
        import transformers
        from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
        from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
        from megatron.core.datasets.utils import get_blend_from_list
        from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer

        args = argparse.Namespace(**request["args"])
        tokenizer = build_tokenizer(args)
        config = GPTDatasetConfig(
            random_seed=args.seed, sequence_length=args.seq_length, blend=get_blend_from_list(args.data_path),
            blend_per_split=None, split=args.split, num_dataset_builder_threads=args.num_dataset_builder_threads,
            path_to_cache=args.data_cache_path, mmap_bin_files=args.mmap_bin_files, tokenizer=tokenizer,
            reset_position_ids=args.reset_position_ids, reset_attention_mask=args.reset_attention_mask,
            eod_mask_loss=args.eod_mask_loss, create_attention_mask=args.create_attention_mask_in_dataloader,
        )
        train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, request["sizes"], lambda: True, config).build()
    windows = [np.concatenate([train[i]["tokens"].numpy(), train[i]["labels"].numpy()[-1:]])
               for i in request["indices"]]
    library = getattr(tokenizer, "_tokenizer", None)
    np.savez(request["out"], windows=np.stack(windows).astype(np.int64), length=np.array(len(train)),
             document_index_size=np.array(train.document_index.size), indices_size=np.array(len(train.indices)),
             transformers_version=np.array(transformers.__version__), core_file=np.array(megatron.core.__file__),
             tokenizer_class=np.array(type(getattr(library, "tokenizer", library)).__name__))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build pretrain_gpt.py's training dataset; write samples as .npz")
    parser.add_argument("request", help="a JSON request, or a list of them")
    with open(parser.parse_args(argv).request, encoding="utf-8") as handle:
        requests = json.load(handle)
    for request in requests if isinstance(requests, list) else [requests]:
        build(request)
    return 0


if __name__ == "__main__":
    sys.exit(main())

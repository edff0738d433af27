"""Stand-in for the trainer's argument updates (save path, data paths, SP only with TP) and vocabulary padding."""

import os

from primus.modules.base_module import BaseModule


class MegatronPretrainTrainer(BaseModule):
    def update_primus_config(self, args, exp_meta_info, exp_root_path):
        args.rank, args.world_size = self.module_rank, self.module_world_size
        args.save = os.path.abspath(os.path.join(exp_root_path, "checkpoints"))
        if args.train_data_path is not None:
            args.train_data_path = args.train_data_path.split(" ")
        if args.tensor_model_parallel_size == 1:
            args.sequence_parallel = False

    def vocab_size_with_padding(self, orig_vocab_size, args):
        multiple = args.make_vocab_size_divisible_by * args.tensor_model_parallel_size
        return -(-orig_vocab_size // multiple) * multiple

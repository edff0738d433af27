"""Stand-in for the vocabulary padding rule."""


def _vocab_size_with_padding(orig_vocab_size, args, logging_enabled=True):
    multiple = args.make_vocab_size_divisible_by * args.tensor_model_parallel_size
    return -(-orig_vocab_size // multiple) * multiple

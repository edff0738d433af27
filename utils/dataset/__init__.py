"""A dataset on disk as the trainers see it.

its paths and tokenizer, the tokenizer megatron-core's dataset gets, the digest of fed samples, and the fingerprint
of a run's inputs.
"""

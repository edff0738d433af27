"""How ``data/encode.py`` turns text into Megatron's indexed dataset: the encoders, their exactness gate, the writer.

``paths.py`` chooses the encoder (the fast ``tiktoken`` path of ``fast_bpe.py`` where ``check.py`` finds it
exact, else the tokenizer itself) and cuts long documents (``long_documents.py``); ``idx_writer.py`` writes the
``.bin``/``.idx`` pair.
"""

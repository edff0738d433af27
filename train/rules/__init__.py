"""The training rules every framework shares.

the LR schedule, Megatron's initialisation rule, the reference sample order, and which framework code a job runs.
"""

"""What machine this is.

platform detection and datasheet peaks, GPU facts, the environment capture, the GPU prescreen and the rendezvous
check before a job.
"""

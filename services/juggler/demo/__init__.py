"""`juggler demo`: the whole service on this machine, watched from the terminal.

A local broker, the topics, one worker, the thesis's ICU queries registered on the
control topic, a producer of simulated patient vitals, and each query's results read
back from its results topic as they are committed.
"""

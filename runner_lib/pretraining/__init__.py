"""Pre-training: masked-LM / next-sentence instances from text (data.py,
sharding.py) and the pre-training task with the paper's ablations
(task.py)."""

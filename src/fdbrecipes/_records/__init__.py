"""What every job structure (Queue, PriorityQueue, FairQueue) keeps about its jobs and
workers, whatever engine holds its items.

:mod:`.records` a job's record, written with its item; :mod:`.history` results,
follow-ups, waiting for a job, pruning; :mod:`.finished` the finished jobs' listing;
:mod:`.tokens` the tokens naming listed rows; :mod:`.registry` the workers' records and
operators' orders; :mod:`.series` throughput and backlog per minute.  It knows no
engine: the engines and the operations objects hand their parts in.
"""

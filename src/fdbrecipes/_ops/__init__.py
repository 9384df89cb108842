"""The operations objects: every call of a structure, its arguments checked, as an
operation (``structure.ops``, see :mod:`fdbrecipes.protocol`).

:mod:`.base` is what they all have (:class:`~.base.Ops`: the subspace, the retry loop,
the hooks; :class:`~.base.JobOps`: job records and workers, for the job structures);
:mod:`.ordered` is what Queue and PriorityQueue share (:class:`~.ordered.OrderedOps`),
:mod:`.kinds` each of them (:class:`~.kinds.QueueOps`, :class:`~.kinds.PriorityQueueOps`);
:mod:`.tree` is WeightTree's, :mod:`.fair` FairQueue's (one group seen as a queue, above it, in
:mod:`.fair_group`); :mod:`.checks` the argument checks they share; :mod:`.layout_guard`
the check of the stored layout each object makes before its first call.  They stand
above the engines (``_ordered/``, ``_tree/``, ``_fair/``) and the job records
(``_records/``), whose operations they hand to the retry loop, and below the public
classes, which drive them.
"""

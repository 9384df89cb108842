"""Workflows: graphs of jobs that advance in their nodes' acks (see
:mod:`fdbrecipes.workflow` and docs/workflows.md).

:mod:`.graph` checks a graph as it is built (nothing is written), :mod:`.engine` holds
the transactions (creating, advancing, stopping), :mod:`.reading` the reads and the
types they give, :mod:`.ops` the checked calls, :mod:`.steps` what a worker adds to a
node's ack, :mod:`.batches` an open batch's adds and close, :mod:`.nesting`
sub-workflows (their writing, start and end).  Keys:
:class:`fdbrecipes._store_layout.WorkflowLayout`.
"""

"""Throwaway local FoundationDB clusters, for tests and local development.

* :mod:`.programs`: finding ``fdbserver``/``fdbcli``, free ports;
* :mod:`.plan`: a cluster's layout and command lines, checked before anything starts;
* :mod:`.status`: roles, health and storage counters from status JSON;
* :mod:`.cluster`: :class:`LocalCluster`, which starts the processes and injects
  faults;
* :mod:`.reaper`: the watchdog that kills the servers if their parent dies;
* :mod:`.command`: ``fdbrecipes cluster``.

The public names are :mod:`fdbrecipes.testing`'s.  Nothing here loads ``libfdb_c``.
"""

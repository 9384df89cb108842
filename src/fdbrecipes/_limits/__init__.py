"""Limits shared by name: definitions (:mod:`.specs`), the store's transactions
(:mod:`.store`), what a claim checks (:mod:`.admission`), what a lease holds and its
end gives back (:mod:`.gate`), what they store and count (:mod:`.slots`); the checked
calls of :class:`fdbrecipes.Limits` are in ``_ops/limits.py``."""

"""Limits shared by name: definitions (:mod:`.specs`), the store's transactions
(:mod:`.store`), what a claim checks and an ack gives back (:mod:`.gate`), and the
checked calls of :class:`fdbrecipes.Limits` (:mod:`.ops`)."""

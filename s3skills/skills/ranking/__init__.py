"""Finding skills: the body sketch kept in the index, BM25F matching, the rankers (`LexicalRanker`,
`HybridRanker` with an optional encoder) and the identity cache they share.

Imports the base layer and `format/` only: never the index, the library or a front end.
"""

__all__: list[str] = []

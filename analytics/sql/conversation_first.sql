-- The first exchange of each conversation `report conversations` kept (conversations.sql):
-- the exchange whose id is the conversation's and which is still that conversation's
-- (conversation_id = id), with the team, model, stored request body (first_body_ref: the
-- caller reads its first prompt) and protocol. max() is what conversations.sql once took
-- of them as `max(…) FILTER (WHERE id = conversation_id)` over the conversation's rows.
-- A conversation whose first exchange is gone (pruned) or moved has no row here.
-- ids: the kept ids as bound parameters (first_0, first_1, …, spliced in by the caller):
-- a list of values reaches the scan as a filter (a lake's row groups of other ids skipped,
-- PostgreSQL asked by its primary key), which a join on them does not.
-- Every day is read, whatever --since says: a first exchange before it still names its
-- conversation's team.
SELECT
    id AS conversation_id,
    max(team) AS team,
    max(coalesce(model, model_requested)) AS model,
    max(request_body_ref) AS first_body_ref,
    max(protocol) AS first_protocol
FROM exchanges
WHERE id IN ($ids) AND conversation_id = id
GROUP BY id

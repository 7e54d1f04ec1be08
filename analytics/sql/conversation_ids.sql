-- Every exchange with the conversation it belongs to (SPEC §5): stored with it when it was
-- written (exchanges.conversation_id, storage/verdicts.py), so this is a plain read.
SELECT * FROM exchanges

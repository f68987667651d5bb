// Package txhub is the Go client of txhub, a transactional event hub: it
// sends the envelopes of a business transaction to the hub's control topic
// (Producer: Prepare, then the local transaction, then Commit or Rollback;
// OneShot for a message with no local transaction), encoding them byte for
// byte as the C library and the Python package do (Encode).
//
// Its subpackages answer the hub's check-backs (checkback.Handler, an
// http.Handler that verifies signature v2) and process forwarded records
// once downstream (dedup, on database/sql with pgx).
//
// Every error is an *Error; test its kind with errors.Is (ErrInvalid,
// ErrKafka, ...) and IsRetriable. The module never logs. See
// docs/producers.md ("Producing from Go") and docs/consumers.md
// ("Consuming without duplicates") in the txhub repository.
package txhub

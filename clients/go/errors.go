package txhub

import "errors"

// The kinds of error the module returns. Every error it returns is an
// *Error whose Is matches one of these, so callers test with errors.Is:
//
//	if errors.Is(err, txhub.ErrInvalid) { ... } // bad input: nothing was sent
var (
	// ErrInvalid: bad input from the caller; nothing was sent or written.
	ErrInvalid = errors.New("invalid input")
	// ErrTooLarge: the envelope would exceed MaxBytes; nothing was sent.
	// errors.Is(err, ErrInvalid) holds for it too.
	ErrTooLarge = errors.New("envelope too large")
	// ErrKafka: Kafka did not confirm the envelope. It may or may not have
	// arrived; sending the same envelope again is always safe (the hub
	// applies it once). Retriable.
	ErrKafka = errors.New("not confirmed by Kafka")
	// ErrFatal: the producer cannot go on (closed, or its Kafka client
	// failed for good): make a new one.
	ErrFatal = errors.New("fatal producer error")
	// ErrUnauthorized: a check-back request whose signature or timestamp
	// does not verify.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrDatabase: a PostgreSQL error. IsRetriable tells serialization
	// failures, deadlocks, lock time-outs and lost connections (run the
	// transaction again) from the rest.
	ErrDatabase = errors.New("database error")
	// ErrClaimLost: a dedup claim expired and another consumer took it over.
	ErrClaimLost = errors.New("claim lost")
)

// Error is the type of every error the module returns.
type Error struct {
	Kind      error  // ErrInvalid, ErrTooLarge, ErrKafka, ...
	Reason    string // one line, for people
	Retriable bool   // trying the same call again later may succeed
	Err       error  // the cause (Kafka's, PostgreSQL's, the context's), or nil
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "txhub: " + e.Reason + ": " + e.Err.Error()
	}
	return "txhub: " + e.Reason
}

// Is matches the error's kind (and ErrInvalid for ErrTooLarge).
func (e *Error) Is(target error) bool {
	return target == e.Kind || (e.Kind == ErrTooLarge && target == ErrInvalid)
}

// Unwrap returns the cause, so errors.Is(err, context.DeadlineExceeded)
// and errors.As(err, &pgErr) work as well.
func (e *Error) Unwrap() error { return e.Err }

// Status is the kind's name as the C library's txhub_status_name and the
// Python package's status give it: "invalid", "too_large", "kafka",
// "fatal", "unauthorized", "db", "db_retry" or "lost".
func (e *Error) Status() string {
	switch e.Kind {
	case ErrInvalid:
		return "invalid"
	case ErrTooLarge:
		return "too_large"
	case ErrKafka:
		return "kafka"
	case ErrFatal:
		return "fatal"
	case ErrUnauthorized:
		return "unauthorized"
	case ErrDatabase:
		if e.Retriable {
			return "db_retry"
		}
		return "db"
	case ErrClaimLost:
		return "lost"
	}
	return "error"
}

// IsRetriable reports whether err is an *Error that says trying again
// later may succeed.
func IsRetriable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retriable
}

// Invalid returns an ErrInvalid error with the reason; the checkback and
// dedup packages use it for their own input checks.
func Invalid(reason string) error { return &Error{Kind: ErrInvalid, Reason: reason} }

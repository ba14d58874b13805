package limits

import (
	"time"

	"bighive/internal/apierr"
)

// MaxFamilyMaxAge is the longest max age (garbage-collection age) a column
// family may declare: 100 years. Tservers hold the age as a time.Duration,
// which overflows past about 292 years (max_age_micros is an int64 of
// microseconds, so the wire allows far more); the bound keeps every
// accepted value, and a cell time minus it, well inside that range.
const MaxFamilyMaxAge = 100 * 365 * 24 * time.Hour

// MaxGCRuleDepth bounds the nesting of a column family's GC rule (unions
// and intersections inside one another; the top rule is level 1). The
// master refuses a deeper rule, and the frontend refuses one before
// converting it.
const MaxGCRuleDepth = 32

// ValidateFamilyMaxAge checks a family's max_age_micros against
// MaxFamilyMaxAge (0, keep forever, is fine; negatives are the caller's to
// reject with its own message).
func ValidateFamilyMaxAge(family string, maxAgeMicros int64) error {
	if maxAgeMicros > MaxFamilyMaxAge.Microseconds() {
		return apierr.InvalidArgument("column family %q has max age %d µs, over the limit of %d µs (100 years); use 0 to keep cells forever",
			family, maxAgeMicros, MaxFamilyMaxAge.Microseconds())
	}
	return nil
}

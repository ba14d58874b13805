// Package filter evaluates Cloud Bigtable row filters
// (google.bigtable.v2.RowFilter, the official bigtablepb type) on the
// tablet read path.
//
// Compile validates a filter tree once per request and compiles its
// regexes (RE2, anchored so that they match the whole row key, family,
// qualifier or value, as Bigtable does). Apply then evaluates it on one row
// at a time, as the tablet's Get and Scan produce rows, so a read never
// materialises more than one row to filter it.
//
// Semantics follow Bigtable's documentation:
//   - chain feeds each sub-filter's output to the next; interleave runs
//     every sub-filter on the input and merges the outputs in (family,
//     qualifier, timestamp descending) order, keeping duplicates; a
//     condition runs its true filter on the whole row when the predicate
//     outputs any cell, else its false filter (an absent branch outputs
//     nothing);
//   - row key regex and row sample keep or drop the whole row; family,
//     qualifier and value regexes, column range, value range and
//     timestamp range [start, end) (end 0: unbounded) keep single cells;
//   - cells-per-row offset and limit count cells of the row in order;
//     cells-per-column limit keeps the first N cells of each column;
//   - strip value empties values; apply label sets the cell's one label;
//   - sink sends its input straight to the read's output, merged with the
//     tree's output.
//
// Refused with ErrInvalid (InvalidArgument): an unset filter, a regex that
// does not compile, an empty row key regex, a chain or interleave with
// fewer than two sub-filters, limits <= 0, a negative offset, a row sample
// rate outside (0, 1), a label that is not [a-z0-9-]{1,15}, a chain in
// which two sub-filters apply labels (a cell carries one label), a sink
// inside a condition, a boolean leaf set to false, and filter types this
// server does not implement (value bitmask).
//
// Regexes have Bigtable's RE2 raw byte mode (RE2::Latin1): each byte of
// the pattern and of the field is one character, so "." matches any one
// byte but "\n", \C any byte, \xHH the byte HH, and a UTF-8 literal its
// bytes. They run on Go's regexp (which reads UTF-8) over a rewritten
// pattern and fields whose bytes above 0x7f are re-encoded as the runes of
// their values.
package filter

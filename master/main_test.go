package master

import (
	"testing"

	"bighive/testkit/fastloop"
)

func TestMain(m *testing.M) { fastloop.Main(m) }

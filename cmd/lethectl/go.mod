module github.com/lethe-erasure/lethe/cmd/lethectl

go 1.26.8

require github.com/lethe-erasure/lethe/pkg v0.0.0

replace github.com/lethe-erasure/lethe/pkg => ../../pkg

replace github.com/lethe-erasure/lethe/schemas => ../../schemas

module github.com/lethe-erasure/lethe/schemas

go 1.26.8

CREATE TABLE t (f int NOT NULL, created date);

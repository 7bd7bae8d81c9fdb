CREATE TABLE bookings (
    room int NOT NULL,
    during int4range NOT NULL,
    EXCLUDE USING gist (during WITH &&)
) PARTITION BY LIST (room);

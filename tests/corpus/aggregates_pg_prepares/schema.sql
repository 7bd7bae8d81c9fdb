CREATE SCHEMA desk;
CREATE TABLE desk.members (
    id bigserial PRIMARY KEY,
    email text NOT NULL,
    nickname text,
    labels text[] NOT NULL DEFAULT '{}',
    settings jsonb,
    available tstzrange,
    away tstzmultirange,
    badge_range int8range
);
CREATE UNIQUE INDEX members_email_lower ON desk.members (lower(email));
CREATE TABLE desk.bookings (
    id bigserial PRIMARY KEY,
    member_id bigint NOT NULL REFERENCES desk.members (id),
    room text NOT NULL,
    extra jsonb NOT NULL DEFAULT '{}',
    starts_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE desk.comments (
    id bigserial PRIMARY KEY,
    booking_id bigint REFERENCES desk.bookings (id),
    body text
);
CREATE FUNCTION desk.member_bookings(member bigint) RETURNS SETOF desk.bookings
    LANGUAGE sql STABLE AS $$ SELECT * FROM desk.bookings WHERE member_id = member $$;
CREATE FUNCTION desk.slots(n int) RETURNS TABLE (slot int, label text)
    LANGUAGE sql STABLE AS $$ SELECT g, 'slot ' || g FROM generate_series(1, n) AS g $$;

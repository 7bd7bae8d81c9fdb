CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL);
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'nobody_here') THEN
        RAISE NOTICE 'no such role';
    END IF;
END
$$;

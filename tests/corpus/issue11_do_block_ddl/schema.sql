DO $$
BEGIN
    CREATE TABLE hidden (id int PRIMARY KEY);
END
$$;

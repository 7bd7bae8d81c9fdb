DO $$
BEGIN
    FOR i IN 1..1 LOOP
        EXECUTE 'CREATE TABLE hidden (id int PRIMARY KEY)';
    END LOOP;
END
$$;

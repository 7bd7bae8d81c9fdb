CREATE TABLE shelves (shelf_id bigint PRIMARY KEY, label text NOT NULL);
CREATE TABLE volumes (volume_id bigserial PRIMARY KEY, shelf_id bigint NOT NULL REFERENCES shelves, pages integer NOT NULL);
